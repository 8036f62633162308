export const nowMs = (): number => Date.now();
export const toUnixSeconds = (ms: number | null | undefined): number | null =>
  ms === null || ms === undefined ? null : Math.floor(ms / 1000);
export const bool = (flag: number | boolean | null | undefined): boolean => flag === 1 || flag === true;
export const flag = (value: boolean): 0 | 1 => (value ? 1 : 0);
