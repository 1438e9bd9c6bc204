import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * Calls `done` once, when the response is over: its 'close', which Node emits after 'finish'
 * when the answer was sent and alone when the connection went first. A pipelined response
 * still queued behind an earlier one on its connection has no socket yet and gets no 'close'
 * of its own if the connection dies (Node 20), so for such a response the connection's
 * 'close' counts too; whichever comes first removes the other listener.
 */
export function whenResponseDone(req: IncomingMessage, res: ServerResponse, done: () => void): void {
  const queued = res.socket ? null : req.socket;
  const over = () => {
    res.off('close', over);
    queued?.off('close', over);
    done();
  };
  res.on('close', over);
  queued?.on('close', over);
}
