// The default session's id, apart from the session schemas so that zod-free processes (the
// agent) can hold it.

/** The session every sandbox has; it is created on demand and cannot be deleted. */
export const DEFAULT_SESSION_ID = 'default'
