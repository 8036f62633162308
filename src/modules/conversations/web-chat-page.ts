// The web chat's HTML (docs/conversations.md, Web chat): one self-contained page per agent slug,
// its CSS and script inline, and the Content-Security-Policy that lets only that script and that
// style run (by their SHA-256 hashes, computed here once). What the server puts in the page (the
// agent's title and welcome message) is HTML-escaped; what the script shows (messages) is set
// with textContent only, so no text anyone typed ever becomes markup.
import crypto from 'node:crypto';

const CSS = `
*{box-sizing:border-box}
html,body{height:100%;margin:0}
body{font:16px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f4f5f7;color:#1d2330}
main{display:flex;flex-direction:column;height:100%;max-width:46rem;margin:0 auto;background:#fff}
header{padding:.9rem 1.1rem;border-bottom:1px solid #e3e6ea}
h1{font-size:1.15rem;margin:0;overflow-wrap:anywhere}
#log{flex:1;overflow-y:auto;list-style:none;margin:0;padding:1rem;display:flex;flex-direction:column;gap:.5rem}
.msg{max-width:80%;padding:.55rem .8rem;border-radius:1rem;white-space:pre-wrap;overflow-wrap:anywhere}
.agent{align-self:flex-start;background:#eef0f4;border-bottom-left-radius:.3rem}
.visitor{align-self:flex-end;background:#2458d6;color:#fff;border-bottom-right-radius:.3rem}
.pending{align-self:flex-start;color:#6b7280;background:none}
.failed{opacity:.55}
.note{align-self:center;max-width:100%;color:#6b7280;font-size:.9rem;background:none}
#status{min-height:1.4rem;margin:0;padding:0 1.1rem;color:#b42318;font-size:.9rem}
form{display:flex;gap:.5rem;padding:.75rem 1rem 1rem;border-top:1px solid #e3e6ea}
textarea{flex:1;resize:none;font:inherit;padding:.55rem .7rem;border:1px solid #c9ced6;border-radius:.6rem}
button{font:inherit;padding:0 1.1rem;border:0;border-radius:.6rem;background:#2458d6;color:#fff;cursor:pointer}
button:disabled{background:#9aa7c4;cursor:default}
.gone{margin:auto;padding:2rem;text-align:center}
`.trim();

const SCRIPT = `
(function () {
  'use strict';
  var main = document.getElementById('chat');
  var endpoint = main.getAttribute('data-endpoint');
  var welcome = main.getAttribute('data-welcome') || '';
  var log = document.getElementById('log');
  var status = document.getElementById('status');
  var form = document.getElementById('send');
  var input = document.getElementById('text');
  var button = document.getElementById('go');
  // The welcome message shown (not yet recorded) at the top of an empty chat.
  var welcomeShown = false;

  function bubble(kind, text, before) {
    var li = document.createElement('li');
    li.className = 'msg ' + kind;
    li.textContent = text;
    if (before) log.insertBefore(li, before); else log.appendChild(li);
    log.scrollTop = log.scrollHeight;
    return li;
  }
  function say(text) { status.textContent = text; }
  function ended() { bubble('note', 'The conversation has ended. Write again to start a new one.'); }

  function call(method, body) {
    var init = { method: method, credentials: 'same-origin', headers: { accept: 'application/json' } };
    if (body !== undefined) { init.headers['content-type'] = 'application/json'; init.body = JSON.stringify(body); }
    return fetch(endpoint, init).then(function (res) {
      return res.json().catch(function () { return null; }).then(function (data) {
        return { status: res.status, data: data, retryAfter: res.headers.get('retry-after') };
      });
    });
  }

  function problem(r) {
    if (r.status === 429) return 'Too many messages. Try again in ' + (r.retryAfter || 'a few') + ' seconds.';
    if (r.status === 401) return 'Your chat session has expired. Reload the page to start again.';
    if (r.status === 409) return 'The agent is still answering your last message.';
    if (r.status === 400 && r.data && typeof r.data.message === 'string') return r.data.message;
    if (r.status === 404) return 'This chat is no longer available.';
    return 'The agent could not answer. Please try again.';
  }

  function showWelcome() {
    if (welcome) { bubble('agent', welcome); welcomeShown = true; }
  }

  function load() {
    return call('GET').then(function (r) {
      if (r.status !== 200 || !r.data || !Array.isArray(r.data.messages)) {
        showWelcome();
        if (r.status !== 200) say(problem(r));
        return;
      }
      r.data.messages.forEach(function (m) {
        bubble(m.from === 'visitor' ? 'visitor' : 'agent', String(m.text));
      });
      if (r.data.messages.length === 0) showWelcome();
      else if (r.data.ended) ended();
    });
  }

  form.addEventListener('submit', function (ev) {
    ev.preventDefault();
    var text = input.value.trim();
    if (!text || button.disabled) return;
    button.disabled = true;
    say('');
    var mine = bubble('visitor', text);
    input.value = '';
    var typing = bubble('pending', '…');
    call('POST', { text: text }).then(function (r) {
      typing.remove();
      if (r.status === 200 && r.data && typeof r.data.reply === 'string') {
        if (typeof r.data.welcome === 'string' && !welcomeShown) bubble('agent', r.data.welcome, mine);
        welcomeShown = false;
        bubble('agent reply', r.data.reply);
        if (r.data.ended) ended();
        return;
      }
      if (r.status === 502 || r.status === 503) {
        mine.className += ' failed';
      } else {
        mine.remove();
        input.value = text;
      }
      say(problem(r));
    }, function () {
      typing.remove();
      mine.className += ' failed';
      say('The agent could not answer. Check your connection and try again.');
    }).then(function () {
      button.disabled = false;
      input.focus();
    });
  });

  input.addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); form.requestSubmit(); }
  });

  load().catch(function () { say('The conversation could not be loaded. Reload the page.'); });
})();
`.trim();

const sha256 = (text: string) => `'sha256-${crypto.createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * The page's policy: nothing but its own inline script and style (by hash), requests to its own
 * origin, no framing, no base or form targets.
 */
export const PAGE_CSP = [
  "default-src 'none'", `script-src ${sha256(SCRIPT)}`, `style-src ${sha256(CSS)}`, "connect-src 'self'",
  "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join('; ');

/** Text for HTML content and double-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function htmlDocument(title: string, body: string): string {
  return `<!doctype html>
<html>
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>${escapeHtml(title)}</title>
<style>${CSS}</style>
</head>
<body>
${body}
</body>
</html>
`;
}

/** The chat page of one agent: its title, its welcome message, and the messages endpoint the script calls. */
export function chatPage(p: { title: string; welcome: string; endpoint: string }): string {
  return htmlDocument(p.title, `<main id="chat" data-endpoint="${escapeHtml(p.endpoint)}" data-welcome="${escapeHtml(p.welcome)}">
<header><h1>${escapeHtml(p.title)}</h1></header>
<ol id="log" aria-live="polite"></ol>
<noscript><p class="gone">This chat needs JavaScript.</p></noscript>
<p id="status" role="status"></p>
<form id="send" autocomplete="off">
<textarea id="text" name="text" rows="2" maxlength="2000" placeholder="Write a message" aria-label="Message" required></textarea>
<button id="go" type="submit">Send</button>
</form>
</main>
<script>${SCRIPT}</script>`);
}

/** A page that says why there is no chat (unknown slug, too many new visitors). */
export function noticePage(heading: string, text: string): string {
  return htmlDocument(heading, `<main><p class="gone"><strong>${escapeHtml(heading)}</strong><br>${escapeHtml(text)}</p></main>`);
}
