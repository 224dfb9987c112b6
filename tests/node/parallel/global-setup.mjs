// Starts the application's server once for every worker (it inherits the run's NODE_OPTIONS, so its preload).
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'

export default async function setup ({ provide }) {
  const server = spawn(process.execPath, [fileURLToPath(new URL('server.mjs', import.meta.url))], {
    stdio: ['ignore', 'pipe', 'inherit']
  })
  const [line] = await once(server.stdout, 'data')
  provide('appUrl', `http://127.0.0.1:${String(line).trim().split(' ')[1]}`)
  return () => server.kill('SIGTERM')
}
