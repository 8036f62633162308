// A slow network link for tests: a TCP relay on loopback in front of a real server that carries
// what the client sends at `bytesPerSecond` (what the server sends goes back at once). A test that
// must act while an upload is under way (kill the uploading process) gets seconds to do it, however
// fast the machine, without changing the server.
import net from 'node:net';

export interface SlowLink { port: number; close(): Promise<void> }

export async function startSlowLink(target: { host: string; port: number }, bytesPerSecond: number): Promise<SlowLink> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target);
    sockets.add(client); sockets.add(upstream);
    // 1 KB at a time, each after its share of a second.
    const pending: Buffer[] = [];
    let sending = false;
    let timer: NodeJS.Timeout | undefined;
    // Either side gone (or the link closed): what was still to be carried is dropped with its timer,
    // which would otherwise go on pacing pieces into a closed socket for seconds.
    const end = () => {
      clearTimeout(timer);
      pending.length = 0;
      client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream);
    };
    client.on('error', end); upstream.on('error', end); client.on('close', end); upstream.on('close', end);
    upstream.pipe(client);
    const pump = () => {
      const piece = pending.shift();
      if (!piece) { sending = false; client.resume(); return; }
      upstream.write(piece);
      timer = setTimeout(pump, (piece.length / bytesPerSecond) * 1000);
    };
    client.on('data', (chunk: Buffer) => {
      for (let i = 0; i < chunk.length; i += 1024) pending.push(chunk.subarray(i, i + 1024));
      client.pause();
      if (!sending) { sending = true; pump(); }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(() => resolve()); }),
  };
}
