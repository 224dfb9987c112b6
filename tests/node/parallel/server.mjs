// The application as its own server process on 127.0.0.1: $APP_PORT, or a free port; prints `listening <port>`.
import { app } from './app.mjs'

const server = app.listen(Number(process.env.APP_PORT || 0), '127.0.0.1', () => console.log(`listening ${server.address().port}`))
process.on('SIGTERM', () => server.close(() => process.exit(0)))
