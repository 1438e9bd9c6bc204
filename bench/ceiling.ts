// The ceiling for the benchmark: a bare Express JSON handler on the same machine.
import express from 'express';

const app = express();
app.get('/healthz', (_req, res) => {
  res.json({ status: 'ok' });
});
app.post('/echo', express.json(), (req, res) => {
  res.json({ ok: true, n: Object.keys(req.body ?? {}).length });
});
const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const addr = server.address();
  console.log(JSON.stringify({ msg: 'ceiling listening', port: typeof addr === 'object' && addr ? addr.port : 0 }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
