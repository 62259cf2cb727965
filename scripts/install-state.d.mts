/** Where the record of the last successful install lives, relative to the root. */
export declare const INSTALL_RECORD: string

/** The workspace package folders (relative), from pnpm-workspace.yaml's `packages:` list. */
export declare function workspaceDirs(root: string): string[]

/** Every file (relative) whose content decides what `pnpm install` does. */
export declare function installInputs(root: string): string[]

/** A hash of the install inputs' names and contents. */
export declare function installHash(root: string): string

/** Whether the last successful install still matches the checkout, and why not when it does not. */
export declare function installState(root: string): { current: true } | { current: false; reason: string }

/** Records a successful install of the checkout as it is now. */
export declare function recordInstall(root: string): void
