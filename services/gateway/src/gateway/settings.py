"""Settings of the gateway."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from assent.contracts import Id
from assent.settings import ServiceSettings


class StaticToken(BaseModel):
    """Who a static API token authenticates: a user of one organisation with its roles."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: Id
    org: Id
    roles: tuple[Literal["admin", "developer", "reviewer", "viewer"], ...]


class GatewaySettings(ServiceSettings):
    service_name: str = "gateway"
    http_port: int = 8100
    owner_urls: dict[str, str] = Field(
        default_factory=lambda: {"edits": "http://127.0.0.1:8101"},
        description='Where the internal API of each owner service lives, as JSON: {"edits": "http://edits:8000"}.',
    )
    api_tokens: dict[str, StaticToken] = Field(
        default_factory=dict,
        description='Static bearer tokens, as JSON: {"<token>": {"user": "u", "org": "o", "roles": ["admin"]}}.',
    )
    oidc_issuer: str | None = None
    """The OpenID Connect issuer whose access tokens (JWT) the API accepts (the ``iss`` they must carry)."""
    oidc_audience: str | None = None
    """The ``aud`` an access token must carry."""
    oidc_jwks_url: str | None = None
    """Where the issuer publishes its signing keys (JWKS); fetched, cached, and fetched again for a new key id."""
    oidc_console_client_id: str | None = None
    """The console's client id at the issuer (a public client: authorization code with PKCE, no secret); set, the
    console offers "Sign in with" the issuer, whose ``/.well-known/openid-configuration`` names its endpoints."""
    oidc_console_scope: str = "openid"
    """The scope the console asks for (some issuers want the API's own scope to issue an access token for it)."""
    oidc_jwks_cache_seconds: int = 300
    """How long the issuer's JWKS is kept before it is fetched again."""
    oidc_jwks_refresh_cooldown_seconds: float = 30.0
    """A token naming an unknown key id fetches the JWKS again at most this often (a rotated key waits that long;
    forged key ids cannot hammer the issuer)."""
    oidc_algorithms: tuple[str, ...] = ("RS256", "ES256")
    """The signature algorithms an access token may use (JSON list)."""
    oidc_leeway_seconds: int = 30
    """Clock skew allowed when an access token's expiry and not-before times are checked."""
    oidc_user_claim: str = "sub"
    """The claim that names the user."""
    oidc_org_claim: str = "org_id"
    """The claim that names the user's organisation."""
    oidc_roles_claim: str = "roles"
    """The claim that lists the user's roles (a list, or a space-separated string)."""
    decision_timeout_seconds: float = 10.0
    """How long a decision POST waits for the owner's outcome before answering 504 (the decision stands)."""
    kafka_stall_seconds: float = Field(default=10.0, ge=0)
    """How long the oldest message the gateway committed may wait for Kafka's acknowledgement before the writes that
    would send one (a decision, Apply all and Decline all, Continue, a revert) are refused with 503, ``retry`` and
    ``Retry-After``, before anything is recorded, until Kafka takes the gateway's messages again (fewer in-sync
    replicas than ``min.insync.replicas``, no leader). Longer than a leader's election (a few seconds); 0: never
    refused, such writes are recorded and wait (a decision answers 504 after ``ASSENT_DECISION_TIMEOUT_SECONDS``)."""
    history_link_seconds: float = Field(default=1.0, gt=0)
    """How often the history linker chains the entries written since (an entry is in the history's pages this long
    after its change, at most, while the linker keeps up)."""
    history_link_batch: int = Field(default=2000, ge=1)
    """How many entries the linker chains in one transaction."""
    history_signing_key: SecretStr | None = None
    """The Ed25519 key that signs the history's checkpoints (``ASSENT_HISTORY_SIGNING_KEY``): its 32-byte seed in
    base64 (``python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())'``), or a PEM private
    key. Its id is the first 16 hex digits of the SHA-256 of its raw public key. Unset: no checkpoint is signed,
    nothing is pruned, and verify says so. Rotation: docs, how-to, Rotate keys and tokens."""
    history_retired_keys: str = ""
    """Public keys that verify checkpoints but sign none (``ASSENT_HISTORY_RETIRED_KEYS``): the keys that signed
    before the current one, each its 32 raw bytes in base64 (as ``GET /api/history/keys`` lists them),
    comma-separated."""
    history_checkpoint_seconds: float = Field(default=60.0, gt=0)
    """How often each organisation's chain head is signed, when it moved since its last checkpoint: what was linked
    since the newest checkpoint is what a checkpoint does not yet prove."""
    history_retention_days: float | None = Field(default=None, gt=0)
    """How long history entries are kept (``ASSENT_HISTORY_RETENTION_DAYS``); older ones are pruned, each prune
    leaving a signed checkpoint of the last entry it removed. Unset: kept for ever."""
    history_prune_seconds: float = Field(default=3600.0, gt=0)
    """How often the retention job looks for entries older than the retention period."""
    history_prune_batch: int = Field(default=1000, ge=1)
    """How many entries the retention job deletes in one transaction (each its own, short)."""
    history_retention_database_url: SecretStr | None = None
    """The login the retention job connects as (``ASSENT_HISTORY_RETENTION_DATABASE_URL``, ``postgresql+asyncpg://
    ...``): a member of the role ``assent_history_retention``, which alone may delete history. Unset: the job
    uses ``DATABASE_URL`` and takes the role there (``SET ROLE``), which works where that login is a superuser or a
    member of it."""
    policy_rules_seconds: float = Field(default=0.5, gt=0)
    """How often the rule worker judges new proposals by their organisation's policy (a rule's decision is sent
    within this long of the proposal, while the worker keeps up)."""
    webhook_seconds: float = Field(default=0.5, gt=0)
    """How often the webhook worker reads the organisations' new history entries and due escalations, and sends the
    deliveries that are due (an event is sent within about this long of its entry's linking)."""
    webhook_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    """How long one delivery's attempt may take (connecting, sending, the answer) before it counts as failed."""
    webhook_retry_seconds: float = Field(default=5.0, gt=0)
    """The wait before a failed delivery is tried again, doubled at each attempt (an hour at most between two)."""
    webhook_give_up_seconds: float = Field(default=3600.0, gt=0)
    """How long after it was made (or replayed) a failing delivery is tried; past it, it is dead: listed for an
    admin, who may replay it."""
    webhook_concurrency: int = Field(default=16, ge=1, le=1000)
    """How many deliveries one gateway sends at once (each in a task of its own: a receiver that hangs delays no
    other)."""
    console_url: str = ""
    """The console's public address (``https://assent.example.com``), for the links webhooks' bodies carry to a
    card; unset, they carry the path alone (``/console/#/sessions/...``)."""
