// @conch/link: the runner↔agent link, shared by both roles. See README.md.
export {
  type DecodedFrame,
  type DecodeResult,
  encodeFrame,
  encodeFrameHead,
  FrameDecoder,
  type HeaderReader,
  type Payload,
  payloadBytes,
} from './frame-codec.ts'
export {
  type AnswerFrame,
  answerCall,
  type CallAnswer,
  type CallErrors,
  type CallFrame,
  type CallOptions,
  type CallParser,
  type HandlerTable,
  LinkCalls,
  type MethodTable,
  type ParamsOf,
  type ResultOf,
  schemaCallParser,
} from './link-calls.ts'
export {
  type ChannelHandler,
  type CreditFrame,
  LinkChannel,
  type LinkChannelOptions,
  OVERRUN_ERROR,
  type WithoutChannel,
} from './link-channel.ts'
export {
  type FrameParser,
  type HeartbeatFrame,
  LinkEndpoint,
  type LinkEndpointOptions,
  type LinkFrame,
} from './link-endpoint.ts'
export { connectLinkSocket } from './link-socket.ts'
export { PayloadLease, POOLED_SLABS, Slab, SlabPool } from './slab-pool.ts'
export {
  MIN_READ_BYTES,
  SLAB_BYTES,
  SlabReader,
  type SlabReaderOptions,
  type SlabSink,
} from './slab-reader.ts'
