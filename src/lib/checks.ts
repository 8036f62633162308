// Small value checks shared by several modules.

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** A plausible e-mail address (one @, a dot in the domain, no spaces); delivery is not ours to prove. */
export const isEmail = (value: string): boolean => EMAIL.test(value);

/**
 * The canonical name of a real IANA time zone, or undefined. Offsets such as "+05:00" are refused
 * even where Intl accepts them: they have no DST rules and are not zones. The case is made
 * canonical ("america/chicago" → "America/Chicago"), but an alias is kept as written (ICU would
 * turn "Asia/Kolkata" into "Asia/Calcutta").
 */
export function canonicalTimeZone(value: string): string | undefined {
  const name = value.trim();
  if (!/^[A-Za-z]/.test(name)) return undefined;
  try {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
    return resolved.toLowerCase() === name.toLowerCase() ? resolved : name;
  } catch {
    return undefined;
  }
}
