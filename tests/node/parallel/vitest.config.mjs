import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['parallel/*.vitest.mjs'], // not *.test.mjs: `node --test` (npm test) would pick those up
    setupFiles: ['parallel/cassette.setup.mjs'],
    globalSetup: ['parallel/global-setup.mjs'],
    pool: process.env.VITEST_POOL || 'forks',
    maxWorkers: 4,
    minWorkers: 4,
    fileParallelism: true
  }
})
