// The text of a text task as the contract writes it (`type: text`, `target`, `context`, no
// `content`): the agent writes it with its model, from its live instructions, the task's context
// and the notes kept about the person, when the task runs (src/modules/tasks/run-task.ts keeps it
// on the task before sending, so every attempt sends the same words). Once sent it is recorded in
// the person's text conversation (sms.ts, recordTextTask) and their answer continues it.
// docs/tasks.md, "Text tasks".
import type { Db, TaskRow } from '../../db/types.ts';
import { usageRepo } from '../billing/repository.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { ContextService } from '../context/service.ts';
import type { ModelsService } from '../models/service.ts';
import { buildMessages } from './prompt.ts';
import type { ConversationService } from './service.ts';

export interface TextTaskWriterDeps {
  db: Db;
  models: Pick<ModelsService, 'resolve'>;
  context: Pick<ContextService, 'forPerson'>;
  conversations: Pick<ConversationService, 'liveConfig'>;
  now(): number;
}

export function textTaskWriter(deps: TextTaskWriterDeps) {
  const { db } = deps;
  return {
    /** The words the agent sends; throws when its agent is gone or the model fails. Its tokens count as the organization's model usage. */
    async compose(task: Pick<TaskRow, 'org_id' | 'account_id' | 'target' | 'context' | 'task_context'>, signal?: AbortSignal): Promise<string> {
      const agent = await accountRepo.findById(db, task.account_id);
      if (!agent || agent.org_id !== task.org_id || agent.kind !== 'agent') throw new Error(`agent ${task.account_id} is not an agent of the organization`);
      const config = await deps.conversations.liveConfig(agent);
      const counterpart = task.target ?? '';
      const [choice, notes] = await Promise.all([
        deps.models.resolve(task.org_id, config.agentModel),
        deps.context.forPerson(task.org_id, counterpart.toLowerCase()),
      ]);
      const messages = buildMessages({
        config, channel: 'sms', counterpart, now: deps.now(), notes, knowledge: [], history: [], inbound: undefined,
        task: { context: task.context, taskContext: task.task_context, content: null }, opening: 'text',
      });
      const result = await choice.engine.chat({ model: choice.model, messages, signal });
      await usageRepo.add(db, task.org_id, deps.now(), { modelTokens: result.usage.input + result.usage.output });
      return result.text;
    },
  };
}

export type TextTaskWriter = ReturnType<typeof textTaskWriter>;
