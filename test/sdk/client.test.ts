// The typed client (sdk/, @callplane/client) against the real app listening on loopback, on each
// engine: the account ladder made through it, a task queued and read back, and the error answers
// it turns into CallplaneError ({success: false, message} and the status).
// @engines sqlite
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CallplaneError, createCallplaneClient, ok, type CallplaneClient } from '../../sdk/index.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { waitFor } from '../helpers/wait.ts';

for (const engine of ENGINES) {
  describe(`typed client [${engine}]`, () => {
    let h: Harness;
    let baseUrl: string;
    let admin: CallplaneClient;
    before(async () => {
      h = await startHarness(engine, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.05' }, { worker: true });
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      baseUrl = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
      admin = createCallplaneClient({ baseUrl, token: h.adminToken });
    });
    after(async () => { await h?.close(); });

    it('creates a reseller, an organization and an agent, queues a task and reads it back', async () => {
      const created = await ok(admin.POST('/api/v2/createReseller', { params: { query: { targetPartnerId: h.partnerId } }, body: { resellerName: 'Client Reseller' } }));
      assert.equal(created.success, true);
      const resellerId = created.reseller.id;
      assert.equal(created.organization, String(resellerId));

      const { organization } = await ok(admin.POST('/api/v2/createOrganization', { params: { query: { targetResellerId: resellerId } }, body: { orgName: 'Client Org' } }));
      const orgId = organization.id as number;
      const { accountId } = await ok(admin.POST('/api/v2/createAccount', { params: { query: { targetOrganizationId: orgId } }, body: { accountName: 'Client Agent' } }));

      // A token of the organization, made through the client too: the rest acts as the organization.
      const { token } = await ok(admin.POST('/api/v2/tokens', { params: { query: { targetAccountId: orgId } }, body: { type: 'admin', description: 'sdk test' } }));
      const org = createCallplaneClient({ baseUrl, token: token.token });
      const { accounts } = await ok(org.GET('/api/v2/listAccounts', { params: { query: { targetOrganizationId: orgId } } }));
      assert.ok(accounts.some((a) => a.id === accountId), 'the new agent is listed');

      const queued = await ok(org.POST('/api/v2/tasks', { body: { type: 'call', target: '+14155552671', accountId, externalTaskId: 'sdk-1', meta: { from: 'sdk' } } }));
      assert.equal(queued.task.state, 'pending');
      const { task } = await ok(org.GET('/api/v2/tasks/{taskId}', { params: { path: { taskId: queued.task.id } } }));
      assert.equal(task.id, queued.task.id);
      assert.equal(task.accountId, accountId);
      assert.equal(task.externalTaskId, 'sdk-1');
      assert.deepEqual(task.meta, { from: 'sdk' });
      // The worker runs it on the SIMULATED carrier; the client reads the end as it is.
      const done = await waitFor('the task to finish', async () => {
        const { task: t } = await ok(org.GET('/api/v2/tasks/{taskId}', { params: { path: { taskId: task.id } } }));
        return t.state === 'finished' ? t : undefined;
      }, 20_000, 100);
      assert.equal(done.provider, 'simulated');
      const { tasks, total } = await ok(org.GET('/api/v2/tasks', { params: { query: { type: 'call' } } }));
      assert.equal(total, 1);
      assert.equal(tasks[0].id, task.id);
    });

    it('answers a 4xx as CallplaneError with success false and the message naming the field', async () => {
      const { organization } = await ok(admin.POST('/api/v2/createOrganization', { params: { query: { targetResellerId: (await h.reseller()).id } }, body: { orgName: 'Errors Org' } }));
      const org = createCallplaneClient({ baseUrl, token: await h.tokenFor(organization.id as number) });

      // The raw answer: openapi-fetch's {error, response}, typed by the route's error schema.
      const raw = await org.POST('/api/v2/tasks', { body: { type: 'call', target: '+1555' } });
      assert.equal(raw.response.status, 400);
      assert.equal(raw.data, undefined);
      assert.equal(raw.error?.success, false);
      assert.match(raw.error?.message ?? '', /^target '\+1555' is not a valid phone number/);

      // ok() throws it as a CallplaneError.
      await assert.rejects(ok(org.POST('/api/v2/tasks', { body: { type: 'call', target: '+1555' } })), (err: unknown) => {
        assert.ok(err instanceof CallplaneError);
        assert.equal(err.status, 400);
        assert.equal(err.success, false);
        assert.equal(err.body.success, false);
        assert.match(err.message, /^target '\+1555' is not a valid phone number/);
        assert.match(err.requestId ?? '', /\S/);
        return true;
      });
      // Another organization's task is a 404, as for one that does not exist.
      await assert.rejects(ok(org.GET('/api/v2/tasks/{taskId}', { params: { path: { taskId: 'tsk_01M8CEQGHY36G06VXJM1S2YJWP' } } })),
        (err: unknown) => err instanceof CallplaneError && err.status === 404 && /was not found/.test(err.message));
      // A token the service does not know: 401, with the client's bearer header the only credential sent.
      const stranger = createCallplaneClient({ baseUrl, token: 'cpl_' + 'x'.repeat(43) });
      await assert.rejects(ok(stranger.GET('/api/v2/account')), (err: unknown) => err instanceof CallplaneError && err.status === 401 && err.success === false);
    });

    it('refuses a base URL that is not http(s) and an empty token', () => {
      assert.throws(() => createCallplaneClient({ baseUrl: 'localhost:8080', token: 'x' }), /baseUrl must be an http\(s\) URL/);
      assert.throws(() => createCallplaneClient({ baseUrl, token: '' }), /token is required/);
    });
  });
}
for (const engine of SKIPPED_ENGINES) {
  describe(`typed client [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
}
