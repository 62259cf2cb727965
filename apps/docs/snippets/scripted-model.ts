// A stand-in for an LLM provider, so the agent-loop page runs offline and in tests: it asks for
// the tool calls in `script`, one step each, then answers with what the last tool returned.
import type { LanguageModel } from 'ai'
import { MockLanguageModelV4 } from 'ai/test'

type Prompt = { role: string; content: unknown }[]

const usage = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
}

/** A model that calls `shell_run` with each command in turn, then reports the last result. */
export function scriptedModel(commands: string[]): LanguageModel {
  let step = 0
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const command = commands[step]
      step += 1
      if (command !== undefined) {
        return {
          content: [
            {
              type: 'tool-call',
              toolCallId: `call-${step}`,
              toolName: 'shell_run',
              input: JSON.stringify({ command }),
            },
          ],
          finishReason: { unified: 'tool-calls', raw: undefined },
          usage,
          warnings: [],
        }
      }
      return {
        content: [{ type: 'text', text: `The shell said: ${lastToolOutput(prompt as Prompt)}` }],
        finishReason: { unified: 'stop', raw: undefined },
        usage,
        warnings: [],
      }
    },
  })
}

/** The text of the newest tool result in the prompt the SDK sent. */
function lastToolOutput(prompt: Prompt): string {
  const tool = prompt.findLast((m) => m.role === 'tool')
  const parts = (tool?.content ?? []) as { type: string; output?: { type: string; value: unknown } }[]
  const output = parts.findLast((p) => p.type === 'tool-result')?.output
  return typeof output?.value === 'string' ? output.value.trim() : JSON.stringify(output?.value)
}
