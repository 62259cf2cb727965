export {
  type BuildRouterOptions,
  buildRouter,
  REDACTED_PATHS,
  ROUTER_VERSION,
  type RouterApp,
} from './app.ts'
export { ConfigError } from './config-error.ts'
export { DEFAULT_ROUTER_PORT, parseRouterConfig, RouterConfig, routerConfigUsage } from './router-config.ts'
export { RouterError } from './router-error.ts'
export { buildShardTable, type Shard, type ShardTable } from './shard-table.ts'
