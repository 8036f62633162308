// A SIP registrar that accepts every REGISTER (200 OK, no authentication), over UDP: enough for
// tests that need a registration to exist (and its messages captured) without Kamailio.
import dgram from 'node:dgram';

export interface FakeRegistrar {
  host: string;
  port: number;
  /** REGISTERs received, as text. */
  received: string[];
  close(): Promise<void>;
}

export async function startFakeRegistrar(host = '127.0.0.5'): Promise<FakeRegistrar> {
  const socket = dgram.createSocket('udp4');
  const received: string[] = [];
  socket.on('message', (buf, rinfo) => {
    const text = buf.toString('utf8');
    if (!text.startsWith('REGISTER ')) return;
    received.push(text);
    const lines = text.split('\r\n');
    const header = (name: string) => lines.filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
    const expires = /expires=(\d+)/i.exec(header('Contact')[0] ?? '')?.[1] ?? /^expires:\s*(\d+)/i.exec(header('Expires')[0] ?? '')?.[1] ?? '60';
    const contact = header('Contact')[0]?.replace(/;expires=\d+/i, '');
    const to = header('To')[0] ?? 'To: <sip:unknown@invalid>';
    const answer = [
      'SIP/2.0 200 OK',
      ...header('Via'), ...header('From'),
      /;tag=/i.test(to) ? to : `${to};tag=fake${Date.now()}`,
      ...header('Call-ID'), ...header('CSeq'),
      ...(contact && expires !== '0' ? [`${contact};expires=${expires}`] : []),
      `Expires: ${expires}`,
      'Content-Length: 0', '', '',
    ].join('\r\n');
    socket.send(answer, rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind({ address: host, port: 0 }, () => resolve());
  });
  return {
    host,
    port: socket.address().port,
    received,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
