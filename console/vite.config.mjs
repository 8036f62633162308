// The web console's build (docs/console.md): `npm run build` writes it to dist/console, which the
// service serves at /console/ (src/modules/console/routes.ts). The manifest lets
// scripts/check-console-bundle.mjs hold the bundle to its budget.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/console/',
  plugins: [react()],
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    manifest: true,
    sourcemap: false,
    target: 'es2022',
  },
  server: {
    // `npx vite console` while `npm start` runs: the API and the sign-in are the service's.
    proxy: { '/api': 'http://localhost:8080', '/console/session': 'http://localhost:8080' },
    fs: { allow: [fileURLToPath(new URL('..', import.meta.url))] },
  },
});
