// The worker thread that reads an uploaded do-not-call CSV (csv.ts starts it through
// src/lib/worker-task.ts): every row parsed and its number normalised to E.164 here, off the event
// loop, since both costs grow with the file. Answers the numbers and the refused rows in line order.
import { serveWorkerTask } from '../../lib/worker-task.ts';
import { readDoNotCallCsv, type DncCsvInput } from './csv.ts';

serveWorkerTask(async (input: DncCsvInput) => readDoNotCallCsv(input));
