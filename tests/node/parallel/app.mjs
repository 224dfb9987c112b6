// The application (app.cjs) for the ESM suites; Jest's CommonJS files require app.cjs itself.
export { app, ask } from './app.cjs'
