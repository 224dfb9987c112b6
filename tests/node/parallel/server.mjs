// The application as its own server process, on a free port of 127.0.0.1: prints `listening <port>`.
import { app } from './app.mjs'

const server = app.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`))
process.on('SIGTERM', () => server.close(() => process.exit(0)))
