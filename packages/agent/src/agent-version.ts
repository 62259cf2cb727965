// The agent package's version: the runner reads it in the agent's `hello` and in `agent.info`,
// so both the handshake (runner-connection.ts) and the method table (agent-methods.ts) name it.

/** Agent package version, reported in `hello`. */
export const AGENT_VERSION = '0.1.0'
