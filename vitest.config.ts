import { defineConfig } from 'vitest/config';

// Vite puts DEV=1 (its mode flag) into process.env, which tsgrad would read as a device name
export default defineConfig({
  test: { include: ['test/**/*.test.ts'], setupFiles: ['test/setup.ts'], env: { DEV: '' } },
});
