{{/* The name of one service's objects: "<release>-<service>". */}}
{{- define "assent.service" -}}
{{- printf "%s-%s" .root.Release.Name .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels every object carries. */}}
{{- define "assent.labels" -}}
app.kubernetes.io/part-of: assent
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The labels that select one service's pods. */}}
{{- define "assent.selector" -}}
app.kubernetes.io/name: assent-{{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* One service's image: <registry>/assent-<service>:<tag>. */}}
{{- define "assent.image" -}}
{{- $registry := .root.Values.image.registry -}}
{{- if $registry -}}
{{- printf "%s/assent-%s:%s" (trimSuffix "/" $registry) .name .root.Values.image.tag -}}
{{- else -}}
{{- printf "assent-%s:%s" .name .root.Values.image.tag -}}
{{- end -}}
{{- end -}}

{{/* The "restricted" Pod Security Standard, for a pod and for a container. */}}
{{- define "assent.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "assent.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
