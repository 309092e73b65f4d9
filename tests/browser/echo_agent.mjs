// An interactive tool for the browser test (run by edge-agent as a session's process, wire.md
// §5.5): prints one plain line when it starts (→ agent.output), then answers every input line
// — `{"type","message_id","turn_id","payload"}` — on stdout: a prompt with an agent.message
// "echo: <text>" and a session.usage; an interrupt with "interrupted". Ends at end of input.
import {createInterface} from 'node:readline';

const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
process.stdout.write('echo agent ready\n');
const rl = createInterface({input: process.stdin});
rl.on('line', (line) => {
  let frame;
  try {
    frame = JSON.parse(line);
  } catch {
    process.stdout.write(`not JSON: ${line}\n`);
    return;
  }
  const p = frame.payload || {};
  if (frame.type === 'control.prompt.request') {
    out({type: 'agent.message', payload: {text: `echo: ${p.text}`}});
    out({type: 'session.usage', payload: {input_tokens: String(p.text).length,
      output_tokens: String(p.text).length + 6, estimated_cost: 0.001, tool_invocations: 0}});
  } else if (frame.type === 'control.interrupt') {
    out({type: 'agent.message', payload: {text: 'interrupted'}});
  } else {
    out({type: 'agent.message', payload: {text: `ignored ${frame.type}`}});
  }
});
rl.on('close', () => process.exit(0));
