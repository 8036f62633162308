// Booleans are stored as 0/1 integers on both engines (SQLite has no boolean type).
/** A stored flag read back: 1 (or true) is true, anything else false. */
export const bool = (flag: number | boolean | null | undefined): boolean => flag === 1 || flag === true;
/** A boolean as it is stored. */
export const flag = (value: boolean): 0 | 1 => (value ? 1 : 0);
