// #region browser
// In the browser: the token only works for this one sandbox, and only until it expires.
import { Sandbox } from '@conch/sdk'

declare const session: { runnerUrl: string; sandboxId: string; token: string } // from your server

const sb = await Sandbox.connect(session.sandboxId, { url: session.runnerUrl, token: session.token })
await using sh = await sb.shell()
const { stdout } = await sh.run('uname -a')
document.querySelector('pre')!.textContent = stdout
// #endregion browser
