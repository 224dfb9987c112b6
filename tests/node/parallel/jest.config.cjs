module.exports = {
  rootDir: '..',
  testMatch: ['<rootDir>/parallel/*.jest.cjs'], // not *.test.*: `node --test` (npm test) would pick those up
  setupFilesAfterEnv: ['<rootDir>/parallel/cassette.jest-setup.cjs'],
  testEnvironment: 'node',
  maxWorkers: 4
}
