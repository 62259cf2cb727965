import { Sandbox } from '@conch/sdk'

await using sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})

// #region files
await sb.files.write('/workspace/notes/todo.txt', 'write the docs\n')
const text = await sb.files.read('/workspace/notes/todo.txt')
console.log(text) // "write the docs\n"
for (const entry of await sb.files.list('/workspace/notes')) {
  console.log(entry.name, entry.type, entry.size)
}
// #endregion files

// #region shell-sees-files
await using sh = await sb.shell()
const r = await sh.run('cat notes/todo.txt | wc -l') // sessions start in the workspace
console.log(r.stdout.trim()) // "1"
// #endregion shell-sees-files
