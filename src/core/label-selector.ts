/**
 * Kubernetes label selectors (`matchLabels` and `matchExpressions`) as a Link names the
 * remote Services it mirrors and its fleet-wide members (SPEC §15): parsed once from
 * what the API server stored, then matched against a Service's labels. Pure.
 *
 * One rule differs from Kubernetes' own on purpose, and is linkerd's: an empty or
 * missing selector selects NOTHING (a Link without a selector must not mirror every
 * Service of a cluster).
 */

/** One requirement of `matchExpressions`. */
export interface SelectorRequirement {
  readonly key: string;
  readonly operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  /** Sorted and without duplicates; empty for Exists and DoesNotExist. */
  readonly values: readonly string[];
}

/** A parsed label selector: every requirement must hold. Plain data (crosses threads). */
export interface LabelSelector {
  readonly matchLabels: Readonly<Record<string, string>>;
  readonly matchExpressions: readonly SelectorRequirement[];
}

const OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"] as const;
const LABEL_KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Why `key` is not a label key, or undefined. */
export function labelKeyProblem(key: string): string | undefined {
  const name = key.includes("/") ? key.slice(key.indexOf("/") + 1) : key;
  if (!LABEL_KEY.test(key) || name.length > 63 || key.length > 253) return `${JSON.stringify(key)} is not a label key`;
  return undefined;
}

/** Why `value` is not a label value, or undefined. */
export function labelValueProblem(value: string): string | undefined {
  if (value.length > 63 || !LABEL_VALUE.test(value)) return `${JSON.stringify(value)} is not a label value`;
  return undefined;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Parses a selector as stored in an object (`undefined`/`null`: none). Returns why it is
 * not one as a string: an unknown operator, values with Exists, no values with In, an
 * invalid key or value, a field of the wrong type.
 */
export function parseLabelSelector(raw: unknown): LabelSelector | undefined | string {
  if (raw === undefined || raw === null) return undefined;
  if (!isRecord(raw)) return "must be an object with matchLabels and/or matchExpressions";
  const matchLabels: Record<string, string> = {};
  const labels = raw["matchLabels"] ?? {};
  if (!isRecord(labels)) return "matchLabels must be an object of key: value";
  for (const [key, value] of Object.entries(labels)) {
    const problem = labelKeyProblem(key) ?? (typeof value === "string" ? labelValueProblem(value) : undefined);
    if (problem) return `matchLabels: ${problem}`;
    if (typeof value !== "string") return `matchLabels: the value of ${JSON.stringify(key)} is not a string`;
    matchLabels[key] = value;
  }
  const expressions = raw["matchExpressions"] ?? [];
  if (!Array.isArray(expressions)) return "matchExpressions must be a list";
  const matchExpressions: SelectorRequirement[] = [];
  for (const [i, e] of expressions.entries()) {
    const at = `matchExpressions[${i}]`;
    if (!isRecord(e)) return `${at} must be an object`;
    const { key, operator, values } = e;
    if (typeof key !== "string") return `${at}.key must be a string`;
    const keyProblem = labelKeyProblem(key);
    if (keyProblem) return `${at}: ${keyProblem}`;
    const op = OPERATORS.find((o) => o === operator);
    if (!op) return `${at}.operator ${JSON.stringify(operator)} is not one of ${OPERATORS.join(", ")}`;
    const list = values ?? [];
    if (!Array.isArray(list) || !list.every((x): x is string => typeof x === "string"))
      return `${at}.values must be a list of strings`;
    const setBased = op === "In" || op === "NotIn";
    if (setBased && list.length === 0) return `${at}: operator ${op} needs at least one value`;
    if (!setBased && list.length > 0) return `${at}: operator ${op} takes no values`;
    const valueProblem = list.map(labelValueProblem).find((p) => p !== undefined);
    if (valueProblem) return `${at}: ${valueProblem}`;
    matchExpressions.push({ key, operator: op, values: [...new Set(list)].sort() });
  }
  return { matchLabels, matchExpressions };
}

/** Whether `selector` selects an object with `labels`; an absent or empty selector selects nothing. */
export function selects(
  selector: LabelSelector | undefined,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  if (!selector) return false;
  const requirements = Object.keys(selector.matchLabels).length + selector.matchExpressions.length;
  if (requirements === 0) return false;
  const have = labels ?? {};
  for (const [key, value] of Object.entries(selector.matchLabels)) if (have[key] !== value) return false;
  for (const { key, operator, values } of selector.matchExpressions) {
    const present = Object.hasOwn(have, key);
    const value = have[key];
    switch (operator) {
      case "In":
        if (!present || value === undefined || !values.includes(value)) return false;
        break;
      case "NotIn":
        if (present && value !== undefined && values.includes(value)) return false;
        break;
      case "Exists":
        if (!present) return false;
        break;
      case "DoesNotExist":
        if (present) return false;
        break;
    }
  }
  return true;
}

/** The selector in kubectl's `-l` syntax (for logs, `status` and `link`). */
export function formatLabelSelector(selector: LabelSelector | undefined): string {
  if (!selector) return "";
  const parts = Object.entries(selector.matchLabels)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`);
  for (const { key, operator, values } of selector.matchExpressions) {
    if (operator === "Exists") parts.push(key);
    else if (operator === "DoesNotExist") parts.push(`!${key}`);
    else parts.push(`${key} ${operator === "In" ? "in" : "notin"} (${values.join(",")})`);
  }
  return parts.join(",");
}

/**
 * Parses kubectl's `-l` syntax (`a=b,c!=d,e in (f,g),h notin (i),j,!k`) into the object
 * form a Link stores (as `metav1.ParseToLabelSelector` does): equality into
 * `matchLabels`, the rest into `matchExpressions`. Returns why it is not one as a string.
 */
export function parseSelectorText(
  text: string,
): { matchLabels?: Record<string, string>; matchExpressions?: object[] } | string {
  const matchLabels: Record<string, string> = {};
  const matchExpressions: { key: string; operator: string; values?: string[] }[] = [];
  // Split on commas outside parentheses.
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of text) {
    if (ch === "(") depth += 1;
    if (ch === ")") depth -= 1;
    if (ch === "," && depth === 0) {
      parts.push(current);
      current = "";
    } else current += ch;
  }
  if (current.trim() !== "" || parts.length > 0) parts.push(current);
  for (const raw of parts) {
    const part = raw.trim();
    const set = /^(\S+?)\s+(in|notin)\s+\(([^)]*)\)$/.exec(part);
    const notEqual = /^([^=!\s]+)\s*!=\s*(\S*)$/.exec(part);
    const equal = /^([^=!\s]+)\s*==?\s*(\S*)$/.exec(part);
    const absent = /^!\s*(\S+)$/.exec(part);
    const present = /^(\S+)$/.exec(part);
    if (set) {
      const values = (set[3] ?? "")
        .split(",")
        .map((v) => v.trim())
        .filter(Boolean);
      matchExpressions.push({ key: set[1] ?? "", operator: set[2] === "in" ? "In" : "NotIn", values });
    } else if (notEqual)
      matchExpressions.push({ key: notEqual[1] ?? "", operator: "NotIn", values: [notEqual[2] ?? ""] });
    else if (equal) matchLabels[equal[1] ?? ""] = equal[2] ?? "";
    else if (absent) matchExpressions.push({ key: absent[1] ?? "", operator: "DoesNotExist" });
    else if (present && !/[=!()]/.test(part)) matchExpressions.push({ key: present[1] ?? "", operator: "Exists" });
    else return `${JSON.stringify(part)} is not a label requirement`;
  }
  const result = {
    ...(Object.keys(matchLabels).length > 0 ? { matchLabels } : {}),
    ...(matchExpressions.length > 0 ? { matchExpressions } : {}),
  };
  const checked = parseLabelSelector(result);
  return typeof checked === "string" ? checked : result;
}
