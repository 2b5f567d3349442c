// What a worker does to a run it took over from a worker that was lost, before running it: continue the step whose
// code was running from its checkpoint, or start again from the task on a new branch of the conversation.
import type { ConversationStore } from "../../model/index.ts";

/**
 * A run taken over from a dead worker whose step was running code (its model answer and the observations of the
 * step's completed actions are stored, the running action's code left a checkpoint) continues that step: the
 * checkpoint becomes the paused step of the conversation's head, which the agent resumes with no answers,
 * replaying the host calls the dead worker completed, then running the step's later actions; the model is not
 * asked again and no completed action runs again. Resolves false when the conversation is not at such a step.
 */
export async function pendFromCheckpoint(
  conversations: ConversationStore,
  sessionId: string,
  checkpoint: string,
): Promise<boolean> {
  const conversation = await conversations.load(sessionId);
  if (conversation === undefined) return false;
  // Loaded here, not with the server: the agent brings the engine that reads modules (TypeScript among it).
  const { MossAgent } = await import("../../agent/index.ts");
  if (!MossAgent.pendFromCheckpoint(conversation, checkpoint)) return false;
  await conversations.save(sessionId, conversation);
  return true;
}

/**
 * A run taken over from a dead worker starts again from its task: the conversation's head moves back to before
 * the task's message, so the lost attempt stays as an abandoned branch and the model does not see it twice.
 */
export async function branchBeforeTask(
  conversations: ConversationStore,
  sessionId: string,
  message: string,
): Promise<void> {
  const conversation = await conversations.load(sessionId);
  if (conversation === undefined) return;
  const task = [...conversation.thread()]
    .reverse()
    .find((entry) => entry.role === "user" && entry.content === message);
  if (task === undefined) return;
  conversation.checkout(task.parentId);
  await conversations.save(sessionId, conversation);
}
