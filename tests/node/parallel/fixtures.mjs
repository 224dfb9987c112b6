// docs/e2e.md's fixture: every test announces itself, and its page's requests to the app carry its test.
import { createRequire } from 'node:module'
import path from 'node:path'
import { test as base } from '@playwright/test'

const hooks = process.env.CASSETTE_NODE_TEST_HOOKS
const { startTest, endTest } = hooks ? createRequire(import.meta.url)(hooks) : { startTest () {}, endTest () {} }

export const test = base.extend({
  page: async ({ page }, use, testInfo) => {
    const id = `${path.relative(process.cwd(), testInfo.file)}::${testInfo.titlePath.slice(1).join(' > ')}`
    await startTest(id, { scope: 'test' })
    await page.route(`${testInfo.project.use.baseURL}/**`, (route) =>
      route.continue({ headers: { ...route.request().headers(), 'x-cassette-test': encodeURIComponent(id) } }))
    await use(page)
    await endTest(id)
  }
})
export { expect } from '@playwright/test'
