// The web console's entry (docs/console.md).
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { CallplaneError } from './api.ts';
import { App } from './app.tsx';
import './styles.css';

const queries = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: 5_000,
      // An answer the API gave (a 4xx) is not asked again; a dropped connection is, once.
      retry: (count, err) => !(err instanceof CallplaneError && err.status < 500) && count < 1,
    },
  },
});

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={queries}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
