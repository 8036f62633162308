// Sign-in: paste an API token, or arrive by a one-time link (#/sign-in?ott=…) a reseller made.
// Either is traded at once for the session cookie and is not kept by the page. A link opened while
// someone else is signed in asks first ("You are signed in as X; sign in as Y instead?"): the link is
// looked at without spending it (`peek`), and traded only when the person says so.
import { useEffect, useEffectEvent, useRef, useState, type FormEvent } from 'react';
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
  /** Who is signed in and whom the link signs in, while the page asks which to keep. */
  const [ask, setAsk] = useState<{ current: Account; next: Account; link: string } | null>(null);
  const [current, setCurrent] = useState<Account | null>(null);

  async function signIn(value: string) {
    setBusy(true);
    setError(null);
    try {
      const signedIn = await consoleRequest<{ account: Account }>('POST', '/console/session', { token: value });
      client.setQueryData(SESSION_KEY, { account: signedIn.account });
      navigate('/', { replace: true, raw: true });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  /** A one-time link arrived: sign in with it, or ask first when someone else is signed in. */
  const arrived = useEffectEvent(async (link: string) => {
    const signedIn = await consoleRequest<{ account: Account }>('GET', '/console/session').then((r) => r.account, () => null);
    if (!signedIn) return signIn(link);
    setCurrent(signedIn);
    setBusy(true);
    try {
      const next = (await consoleRequest<{ account: Account }>('POST', '/console/session', { token: link, peek: true })).account;
      if (next.id === signedIn.id) return stay(signedIn);
      setAsk({ current: signedIn, next, link });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  });

  useEffect(() => {
    if (!oneTime || tried.current) return;
    tried.current = true;
    // The link's token leaves the address bar (and the history) before anything else happens.
    window.history.replaceState(null, '', `${window.location.pathname}#/sign-in`);
    void arrived(oneTime);
  }, [oneTime]);

  /** Keeps the sign-in this browser has; the link stays unspent. */
  function stay(account: Account) {
    setAsk(null);
    client.setQueryData(SESSION_KEY, { account });
    navigate('/', { replace: true, raw: true });
  }

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (token.trim()) void signIn(token.trim());
  };

  return (
    <main id="main" className="sign-in">
      <h1>callplane console</h1>
      {ask ? (
        <div className="note stack" role="alertdialog" aria-labelledby="swap-question">
          <p id="swap-question">
            You are signed in as {ask.current.label} <strong>{ask.current.name}</strong> (#{ask.current.id}); sign in
            as {ask.next.label} <strong>{ask.next.name}</strong> (#{ask.next.id}) instead?
          </p>
          <div className="inline-form">
            <Button kind="primary" onClick={() => { const { link } = ask; setAsk(null); void signIn(link); }}>Sign in as {ask.next.name}</Button>
            <Button onClick={() => stay(ask.current)}>Stay signed in as {ask.current.name}</Button>
          </div>
        </div>
      ) : oneTime && busy ? <Note>Signing in with your link…</Note> : null}
      {current && !ask && error ? <Button onClick={() => stay(current)}>Continue as {current.name}</Button> : null}
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
