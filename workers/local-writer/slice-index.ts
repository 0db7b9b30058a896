/**
 * fleet-mirror's EndpointSlices by the Service they belong to (`sliceMirrorName`: their
 * `kubernetes.io/service-name`), kept from the slice store's change events. A reconcile
 * finds every slice of its Service here, whatever the slice's name: one left by an older
 * naming, a crash between writes or a renamed mirror is seen and collected (SPEC §6),
 * and a shared Service's parts are found without scanning every held slice.
 *
 * Invariant: after every change event, `of(key)` holds exactly the held slices whose
 * Service key is `key` (the store emits a change for every key a relist changed).
 */
import { sliceMirrorName } from "../../src/core/endpoint-slices.ts";
import { KeySets } from "../../src/core/key-sets.ts";
import { type EndpointSlice, type KubeObject, objectKey } from "../../src/core/objects.ts";

/** The key (`namespace/name`) of the Service a slice belongs to. */
export function sliceServiceKey(slice: KubeObject): string {
  return objectKey({ namespace: slice.metadata.namespace, name: sliceMirrorName(slice) });
}

/** The slice store as the index reads it. */
export interface SliceSource {
  get(key: string): EndpointSlice | undefined;
  on(
    event: "change",
    listener: (key: string, previous: EndpointSlice | undefined, current: EndpointSlice | undefined) => void,
  ): unknown;
}

export class SliceIndex {
  readonly #source: SliceSource;
  /** Service key → keys of its slices. */
  readonly #byService = new KeySets();

  constructor(source: SliceSource) {
    this.#source = source;
    source.on("change", (key, previous, current) => {
      if (previous) this.#byService.delete(sliceServiceKey(previous), key);
      if (current) this.#byService.add(sliceServiceKey(current), key);
    });
  }

  /** The held slices of Service `serviceKey`, as the store holds them. */
  of(serviceKey: string): EndpointSlice[] {
    const out: EndpointSlice[] = [];
    for (const key of this.#byService.of(serviceKey)) {
      const slice = this.#source.get(key);
      if (slice) out.push(slice);
    }
    return out;
  }
}
