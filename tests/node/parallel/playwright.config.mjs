// Playwright with Debian's chromium and a webServer started under `cassette run` (so with the preload).
import { defineConfig } from '@playwright/test'

const port = process.env.APP_PORT || '3000'
export default defineConfig({
  testDir: '.',
  testMatch: /.*\.pw\.mjs$/, // not *.test.mjs: `node --test` (npm test) would pick those up
  workers: 3,
  fullyParallel: true,
  reporter: 'list',
  webServer: { command: 'node server.mjs', url: `http://127.0.0.1:${port}/`, reuseExistingServer: false },
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    launchOptions: { executablePath: process.env.CHROMIUM || '/usr/bin/chromium' }
  }
})
