/**
 * One label requirement `key=value`: the form of the selectors that pick remote Services
 * for fleet-wide Services (SPEC §11, `--federated-selector`) and for label export (SPEC
 * §12, `--export-selector`). Kubernetes' equality form only: a flag that takes one label
 * is checked once, at start-up, and matched without a selector engine.
 */
export interface LabelRequirement {
  readonly key: string;
  readonly value: string;
}

const LABEL_NAME =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/**
 * Parses `key=value` (also `key==value`), Kubernetes' equality form of a label
 * selector with one requirement. Returns why it is not one (a set-based form, two
 * requirements, an invalid key or value) as a string.
 */
export function parseLabelRequirement(text: string): LabelRequirement | string {
  const match = /^([^=!,\s]+)==?([^=!,\s]*)$/.exec(text.trim());
  if (!match?.[1] || match[2] === undefined) return "must be one requirement key=value";
  const [, key, value] = match;
  const name = key.includes("/") ? key.slice(key.indexOf("/") + 1) : key;
  if (!LABEL_NAME.test(key) || name.length > 63 || key.length > 253) return `${JSON.stringify(key)} is not a label key`;
  if (value.length > 63 || !LABEL_VALUE.test(value)) return `${JSON.stringify(value)} is not a label value`;
  return { key, value };
}

/** `key=value`, as the flag is written. */
export function formatLabelRequirement(requirement: LabelRequirement): string {
  return `${requirement.key}=${requirement.value}`;
}
