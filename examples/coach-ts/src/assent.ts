// A coach's side of Assent over Kafka with KafkaJS: the same topics, keys, headers and envelopes as the Python
// `assent.coach.CoachClient` (contracts/asyncapi/coach.yaml). Every message type comes from the published JSON
// Schemas (src/contracts, written by `npm run generate`).
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { Kafka, logLevel, Partitioners, type Consumer, type KafkaConfig, type Producer, type SASLOptions } from "kafkajs";

import type { SessionClosed } from "./contracts/messages/SessionClosed.js";
import type { SessionOpened, CoachInfo } from "./contracts/messages/SessionOpened.js";
import type { StepEnded } from "./contracts/messages/StepEnded.js";
import type { SessionContext, ToolCall } from "./contracts/messages/ToolCall.js";
import type { ToolResult } from "./contracts/messages/ToolResult.js";
import type { TurnContinuation } from "./contracts/messages/TurnContinuation.js";
import { TOOL_OWNERS, type ToolArguments, type ToolName } from "./contracts/tools.js";

type Envelope = "id" | "type" | "v" | "ts" | "correlation_id" | "causation_id";
type Message = SessionOpened | SessionClosed | ToolCall | StepEnded;

/** The envelope every message carries: `id` (the deduplication key), `type`, `v`, `ts` and the ids that tie it. */
function envelope<M extends Message>(type: M["type"], body: Omit<M, Envelope>): M {
  return {
    id: randomUUID(),
    type,
    v: 1,
    ts: new Date().toISOString(),
    correlation_id: null,
    causation_id: null,
    ...body,
  } as M;
}

/** KafkaJS's security settings from the variables the services and the Python client read (KAFKA_SECURITY_PROTOCOL,
 * KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD, KAFKA_SSL_CAFILE, KAFKA_SSL_CERTFILE,
 * KAFKA_SSL_KEYFILE). */
export function securityFromEnv(env: NodeJS.ProcessEnv = process.env): Pick<KafkaConfig, "ssl" | "sasl"> {
  const protocol = env.KAFKA_SECURITY_PROTOCOL ?? "PLAINTEXT";
  const config: Pick<KafkaConfig, "ssl" | "sasl"> = {};
  if (protocol === "SSL" || protocol === "SASL_SSL") {
    const read = (path: string | undefined) => (path ? readFileSync(path, "utf8") : undefined);
    config.ssl = { ca: read(env.KAFKA_SSL_CAFILE), cert: read(env.KAFKA_SSL_CERTFILE), key: read(env.KAFKA_SSL_KEYFILE) };
  }
  if (protocol === "SASL_PLAINTEXT" || protocol === "SASL_SSL") {
    const mechanism = (env.KAFKA_SASL_MECHANISM ?? "SCRAM-SHA-512").toLowerCase();
    config.sasl = {
      mechanism,
      username: env.KAFKA_SASL_USERNAME ?? "",
      password: env.KAFKA_SASL_PASSWORD ?? "",
    } as SASLOptions;
  }
  return config;
}

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export interface CoachOptions {
  bootstrapServers: string;
  /** The deployment's topic prefix (ASSENT_TOPIC_PREFIX), put before every topic name. */
  topicPrefix?: string;
  clientId?: string;
}

/** A connection to Assent's topics for one coach process; many sessions may share it. */
export class CoachClient {
  private readonly kafka: Kafka;
  private readonly producer: Producer;
  private readonly consumer: Consumer;
  private readonly prefix: string;
  private readonly results = new Map<string, ReturnType<typeof deferred<ToolResult>>>();
  private readonly continuations = new Map<string, ReturnType<typeof deferred<TurnContinuation>>>();

  constructor(options: CoachOptions) {
    this.prefix = options.topicPrefix ?? "";
    this.kafka = new Kafka({
      clientId: options.clientId ?? "assent-coach-ts",
      brokers: options.bootstrapServers.split(","),
      logLevel: logLevel.WARN,
      ...securityFromEnv(),
    });
    // Java's murmur2 partitioner, as aiokafka's and the services': a session's messages share a partition.
    this.producer = this.kafka.producer({ idempotent: true, createPartitioner: Partitioners.DefaultPartitioner });
    // A group of its own that never commits: the client reads results from where the topics ended when it started.
    this.consumer = this.kafka.consumer({ groupId: `assent-coach-ts-${randomUUID()}` });
  }

  topic(name: string): string {
    return `${this.prefix}${name}`;
  }

  /** Connect, and start reading results and continuations from the topics' ends as they are now; call it before
   * publishing. The topics must exist (the services or `deploy/kafka/create-topics.sh` create them). */
  async start(): Promise<void> {
    const admin = this.kafka.admin();
    await admin.connect();
    const reads = [this.topic("studio.tool-results"), this.topic("studio.continuations")];
    const ends = await Promise.all(reads.map(async (topic) => ({ topic, offsets: await admin.fetchTopicOffsets(topic) })));
    await admin.disconnect();
    await this.producer.connect();
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: reads, fromBeginning: false });
    await this.consumer.run({ eachMessage: async ({ message }) => this.read(message.value) });
    // The ends were fixed before anything was published: whatever the group's join resolves, reading starts there.
    for (const { topic, offsets } of ends) {
      for (const { partition, high } of offsets) this.consumer.seek({ topic, partition, offset: high });
    }
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
    await this.producer.disconnect();
  }

  private read(value: Buffer | null): void {
    if (value === null) return;
    let message: { type?: string };
    try {
      message = JSON.parse(value.toString("utf8"));
    } catch {
      return; // not JSON: not for a coach
    }
    // Only what this client awaits: the topics carry other coaches' sessions too. A copy that arrives after its
    // original (at-least-once delivery) finds its promise settled already.
    if (message.type === "ToolResult") {
      const result = message as ToolResult;
      this.results.get(result.tool_call_id)?.resolve(result);
    } else if (message.type === "TurnContinuation") {
      const continuation = message as TurnContinuation;
      const key = `${continuation.session_id}/${continuation.turn_id}/${continuation.step}`;
      this.continuations.get(key)?.resolve(continuation);
    }
  }

  /** Publish `message` on `topic`, keyed by `key`, with its type in the `message-type` header. */
  async publish(topic: string, key: string, message: Message): Promise<void> {
    await this.producer.send({
      topic: this.topic(topic),
      acks: -1,
      messages: [{ key, value: JSON.stringify(message), headers: { "message-type": message.type } }],
    });
  }

  expectResult(toolCallId: string): Promise<ToolResult> {
    if (!this.results.has(toolCallId)) this.results.set(toolCallId, deferred<ToolResult>());
    return this.results.get(toolCallId)!.promise;
  }

  expectContinuation(sessionId: string, turnId: string, step: number): Promise<TurnContinuation> {
    const key = `${sessionId}/${turnId}/${step}`;
    if (!this.continuations.has(key)) this.continuations.set(key, deferred<TurnContinuation>());
    return this.continuations.get(key)!.promise;
  }

  async openSession(context: SessionContext & { coach?: CoachInfo; sessionId?: string }): Promise<CoachSession> {
    const { coach, sessionId, ...session } = context;
    const id = sessionId ?? `ses_${randomUUID().replaceAll("-", "")}`;
    await this.publish(
      "studio.sessions",
      id,
      envelope<SessionOpened>("SessionOpened", {
        session_id: id,
        org_id: session.org_id,
        source_guild_id: session.source_guild_id,
        operator_user_id: session.operator_user_id,
        coach: coach ?? null,
      }),
    );
    return new CoachSession(this, id, session);
  }
}

/** One session: `seq` numbers its tool calls, and every call carries the session's context. */
export class CoachSession {
  private seq = 0;

  constructor(
    readonly client: CoachClient,
    readonly sessionId: string,
    readonly context: SessionContext,
  ) {}

  nextSeq(): number {
    this.seq += 1;
    return this.seq;
  }

  beginTurn(turnId = `turn_${randomUUID().replaceAll("-", "").slice(0, 12)}`): CoachTurn {
    return new CoachTurn(this, turnId);
  }

  async close(): Promise<void> {
    await this.client.publish(
      "studio.sessions",
      this.sessionId,
      envelope<SessionClosed>("SessionClosed", { session_id: this.sessionId }),
    );
  }
}

/** One turn: its steps' tool calls, each step's end, and the continuation that resumes it. */
export class CoachTurn {
  step = 0;
  private pausedStep: number | null = null;
  private readonly waiting: string[] = [];

  constructor(
    readonly session: CoachSession,
    readonly turnId: string,
  ) {}

  /** Publish one call on its owner's topic and wait for its one result. */
  async call<T extends ToolName>(tool: T, args: ToolArguments[T], timeoutMs = 15_000): Promise<ToolResult> {
    const { client, sessionId, context } = this.session;
    const call = envelope<ToolCall>("ToolCall", {
      session_id: sessionId,
      seq: this.session.nextSeq(),
      turn_id: this.turnId,
      step: this.step,
      tool_call_id: `call_${randomUUID().replaceAll("-", "")}`,
      tool,
      arguments: { ...args },
      session: context,
    });
    const owner = TOOL_OWNERS[tool];
    // The deployer's calls are keyed by agent; every other owner's by session.
    const key = owner === "deployer" ? String((args as { agent_id?: string }).agent_id ?? sessionId) : sessionId;
    const result = client.expectResult(call.tool_call_id);
    await client.publish(`${owner}.tool-calls`, key, call);
    const answered = await within(result, timeoutMs, `result of ${tool}`);
    if (answered.ok && answered.widget?.await_operator) this.waiting.push(call.tool_call_id);
    return answered;
  }

  /** End the step: the turn waits on the step's requests that await the operator. */
  async endStep(): Promise<StepEnded> {
    const { client, sessionId } = this.session;
    const ended = envelope<StepEnded>("StepEnded", {
      session_id: sessionId,
      turn_id: this.turnId,
      step: this.step,
      tool_call_ids: this.waiting.splice(0),
    });
    client.expectContinuation(sessionId, this.turnId, ended.step);
    await client.publish("studio.turns", sessionId, ended);
    this.pausedStep = ended.step;
    this.step += 1;
    return ended;
  }

  /** The message that resumes the turn once every request of the last ended step is decided. */
  async continuation(timeoutMs = 300_000): Promise<TurnContinuation> {
    if (this.pausedStep === null) throw new Error("no step of this turn has ended");
    const { client, sessionId } = this.session;
    return within(client.expectContinuation(sessionId, this.turnId, this.pausedStep), timeoutMs, "continuation");
  }
}
