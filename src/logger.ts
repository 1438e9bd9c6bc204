// The logger lives in src/logging/; this path is kept for existing imports.
export { createLogger, REDACT_PATHS } from './logging/logger.ts';
