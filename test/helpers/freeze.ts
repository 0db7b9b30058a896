/**
 * Freezes a value and everything reachable from it, so a pure function under test that
 * mutates its input (an informer-cache object, a desired mirror) throws instead of
 * passing by accident.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
