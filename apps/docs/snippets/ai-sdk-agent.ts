import { conchTools } from '@conch/ai/ai-sdk'
import { Sandbox } from '@conch/sdk'
import { generateText, type LanguageModel, stepCountIs } from 'ai'
import { scriptedModel } from './scripted-model.ts'

// With a provider: `import { openai } from '@ai-sdk/openai'` and `const model = openai('gpt-5-mini')`.
// Offline (and in the docs' tests) a scripted model asks for two commands.
const model: LanguageModel = scriptedModel(['cd /tmp && export GREETING=hello', 'echo "$GREETING from $PWD"'])

// #region loop
await using sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})

const result = await generateText({
  model,
  tools: conchTools({ sandbox: sb }),
  // Each step is one model call; its tool calls run in the sandbox's persistent shell.
  stopWhen: stepCountIs(30),
  system: 'You work in a Linux sandbox through shell_run. The shell keeps cd and variables between calls.',
  prompt: 'Make the tests in app/ pass.',
})
console.log(result.text)
// #endregion loop
console.log(`${result.steps.length} steps`)
