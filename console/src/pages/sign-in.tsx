// Sign-in: paste an API token, or arrive by a one-time link (#/sign-in?ott=…) a reseller made.
// Either is traded at once for the session cookie and is not kept by the page.
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { useQueryClient } from '@tanstack/react-query';
import { consoleRequest } from '../api.ts';
import { navigate } from '../router.tsx';
import { SESSION_KEY, type Account } from '../session.tsx';
import { Button, ErrorNote, Field, Note } from '../ui/parts.tsx';

export default function SignIn({ oneTime }: { oneTime?: string }) {
  const client = useQueryClient();
  const [token, setToken] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const tried = useRef(false);

  async function signIn(value: string) {
    setBusy(true);
    setError(null);
    try {
      const signedIn = await consoleRequest<{ account: Account }>('POST', '/console/session', { token: value });
      client.setQueryData(SESSION_KEY, { account: signedIn.account });
      navigate('/', { replace: true });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  useEffect(() => {
    if (!oneTime || tried.current) return;
    tried.current = true;
    // The link's token leaves the address bar (and the history) before anything else happens.
    window.history.replaceState(null, '', `${window.location.pathname}#/sign-in`);
    void signIn(oneTime);
  }, [oneTime]);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (token.trim()) void signIn(token.trim());
  };

  return (
    <main id="main" className="sign-in">
      <h1>callplane console</h1>
      {oneTime ? <Note>Signing in with your link…</Note> : null}
      <form onSubmit={submit} aria-describedby="sign-in-help">
        <Field label="API token" type="password" autoComplete="off" spellCheck={false} value={token}
          onChange={(e) => setToken(e.target.value)} required />
        <p id="sign-in-help" className="muted">
          The token is traded for a sign-in that lasts a working day; the page never keeps it.
          A reseller can instead send you a one-time link.
        </p>
        <Button kind="primary" type="submit" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</Button>
      </form>
      <ErrorNote error={error} />
    </main>
  );
}
