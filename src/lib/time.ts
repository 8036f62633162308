export const nowMs = (): number => Date.now();
export const toUnixSeconds = (ms: number | null | undefined): number | null =>
  ms === null || ms === undefined ? null : Math.floor(ms / 1000);
