/** The Debian mirror the base image is built from. */
export function debianMirror(): string
/** The tier's cache folder. */
export function defaultCacheDir(): string
/** The base image's content key (a hash of the build script). */
export function baseImageKey(): string
/** Builds the base image's root filesystem tar unless cached; returns its path. */
export function buildBaseImage(cacheDir?: string): string
