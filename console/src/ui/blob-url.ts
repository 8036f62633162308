// A Blob the page fetched (a recording, a pcap) shown by an element through an object URL: the URL
// is the element's `src` or `href` from the moment it is in the page, and is revoked when the Blob
// changes or the element goes. The URL is written to the element itself (the DOM is what an effect
// keeps in step), so no render waits on it.
import { useLayoutEffect, useRef } from 'react';

export function useBlobUrl<E extends HTMLElement>(blob: Blob | null | undefined, attribute: 'src' | 'href') {
  const element = useRef<E>(null);
  useLayoutEffect(() => {
    const el = element.current;
    if (!blob || !el) return undefined;
    const url = URL.createObjectURL(blob);
    el.setAttribute(attribute, url);
    return () => { el.removeAttribute(attribute); URL.revokeObjectURL(url); };
  }, [blob, attribute]);
  return element;
}
