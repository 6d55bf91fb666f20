/* Telling the shim when nothing of the user's runs (docs/runtime.md, "Idle sandboxes").
 *
 * gVisor's systrap platform keeps a timer of its own firing every 400 us for as long as the
 * sandbox lives (its fast-path monitor), which kept 4-5 % of a host core busy per idle
 * sandbox. The shim stretches the timer slack of the sandbox's runsc process while the
 * sandbox is quiet, so those wake-ups are coalesced, and puts it back before it relays the
 * next request. The agent is what knows "quiet": once a second it looks whether anything
 * but itself and its idle resident shells runs, and when nothing does it sends PROTO_IDLE
 * with the count of the daemon's frames it has read, and stops looking until the next one. The shim takes it only when that count
 * is every frame it has handed over, so a request that crossed the notice is never run
 * with the slack stretched. */
#ifndef SBX_AGENT_QUIET_H
#define SBX_AGENT_QUIET_H

struct agent;

/* How often the agent looks while something runs. Once it has said IDLE it stops looking
 * until the daemon's next frame, so a quiet sandbox has no timer of the agent's at all. */
#define QUIET_TICK_MS 1000

/* Start looking (as the sandbox's init only: elsewhere no shim stretches anything). */
void quiet_start(struct agent *a);

/* Count a frame from the daemon. Called before the frame is handled. */
void quiet_frame_in(struct agent *a);

/* The HELLO just counted says "restored": it is the first frame a new shim queued
 * (shim_relay_hello), and that shim's count starts with it. */
void quiet_restored(struct agent *a);

#endif
