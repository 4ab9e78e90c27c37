// The example coach: opens a session, reads an agent's Memory, proposes an edit that adds a line, ends the step,
// and waits for the continuation, printing one JSON line per event on standard output.
//
//   node dist/coach.js --bootstrap-servers 127.0.0.1:9092 --org org_acme --guild guild_support \
//     --operator olga@example.com --agent agent_ada --line "Quote the order number." [--topic-prefix P]
//
// Security and prefix may also come from the variables the services read (KAFKA_SECURITY_PROTOCOL,
// KAFKA_SASL_*, KAFKA_SSL_*, ASSENT_TOPIC_PREFIX).
import { parseArgs } from "node:util";

import { CoachClient } from "./assent.js";

const { values: options } = parseArgs({
  options: {
    "bootstrap-servers": { type: "string", default: process.env.KAFKA_BOOTSTRAP_SERVERS ?? "127.0.0.1:9092" },
    "topic-prefix": { type: "string", default: process.env.ASSENT_TOPIC_PREFIX ?? "" },
    org: { type: "string" },
    guild: { type: "string" },
    operator: { type: "string" },
    agent: { type: "string" },
    line: { type: "string", default: "Quote the order number." },
    "timeout-seconds": { type: "string", default: "300" },
  },
});
for (const required of ["org", "guild", "operator", "agent"] as const) {
  if (!options[required]) {
    console.error(`--${required} is required`);
    process.exit(2);
  }
}

function say(event: string, fields: Record<string, unknown>): void {
  console.log(JSON.stringify({ event, ...fields }));
}

const client = new CoachClient({ bootstrapServers: options["bootstrap-servers"]!, topicPrefix: options["topic-prefix"] });
await client.start();
try {
  const session = await client.openSession({
    org_id: options.org!,
    source_guild_id: options.guild!,
    operator_user_id: options.operator!,
    coach: { name: "TypeScript coach", channel: "studio", model: null },
  });
  say("session", { session_id: session.sessionId });
  const turn = session.beginTurn();

  const memory = await turn.call("studio_read_memory", { agent_id: options.agent! });
  if (!memory.ok || !memory.output) throw new Error(`studio_read_memory refused: ${JSON.stringify(memory.error)}`);
  const { content, version } = memory.output as { content: string; version: number };
  say("memory", { version, content });

  const proposed = await turn.call("studio_edit_memory", {
    agent_id: options.agent!,
    content: `${content}${content.endsWith("\n") || content === "" ? "" : "\n"}${options.line}\n`,
    base_version: version,
    reason: "Proposed by the TypeScript coach.",
  });
  if (!proposed.ok) throw new Error(`studio_edit_memory refused: ${JSON.stringify(proposed.error)}`);
  say("proposed", { seq: proposed.seq, tool_call_id: proposed.tool_call_id, pending: !!proposed.widget?.await_operator });

  const ended = await turn.endStep();
  say("waiting", { turn_id: turn.turnId, step: ended.step, tool_call_ids: ended.tool_call_ids });
  const continuation = await turn.continuation(Number(options["timeout-seconds"]) * 1000);
  say("continuation", {
    turn_id: continuation.turn_id,
    step: continuation.step,
    decisions: continuation.decisions,
    text: continuation.text,
  });
} finally {
  await client.stop();
}
