// Each test types its own id as the prompt, so a recording filed under another test's folder shows.
import path from 'node:path'
import { expect, test } from './fixtures.mjs'

for (const name of ['first', 'second', 'third']) {
  test(`the ${name} answer appears`, async ({ page }, testInfo) => {
    const id = `${path.relative(process.cwd(), testInfo.file)}::${testInfo.titlePath.slice(1).join(' > ')}`
    await page.goto('/')
    await page.getByRole('textbox', { name: 'prompt' }).fill(id)
    await page.getByRole('button', { name: 'Ask' }).click()
    await expect(page.getByTestId('answer')).toHaveText(`echo: ${id}`)
  })
}
