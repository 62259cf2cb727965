// Runs in the browser page that shows the output.
// #region browser
const log = document.querySelector('pre')!
const events = new EventSource(`/run?cmd=${encodeURIComponent('make test')}`)
for (const type of ['stdout', 'stderr']) {
  events.addEventListener(type, (e) => {
    log.append(JSON.parse((e as MessageEvent<string>).data).data)
  })
}
events.addEventListener('exit', (e) => {
  log.append(`\n[exit ${JSON.parse((e as MessageEvent<string>).data).code}]\n`)
  events.close()
})

// #endregion browser
export {}
