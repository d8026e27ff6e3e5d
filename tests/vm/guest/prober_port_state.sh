#!/bin/bash
# vm test: the prober follows its local port's state. A (rxe0) and B (rxe1) probe each other;
# veth0 goes down: rxe0 leaves ACTIVE, A parks its link (rdma_prober_local_port_up 0, no
# rdma_prober_peer_up for it, no probe counted lost or sent from it); veth0 up again: A probes
# again without a counter reset. Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/prober_pair.sh"
trap 'ip link set veth0 up 2>/dev/null; stop_all' EXIT

L=(device=rxe0 port=1 peer=b)
start_a
start_b
section "A probes b from an ACTIVE rxe0"
wait_for $PORT_A 1 rdma_prober_peer_up "${L[@]}" && ok "A sees b up" || bad "A: peer b never up"
expect_value "$WORK/poll" 1 rdma_prober_local_port_up device=rxe0 port=1

section "veth0 down: rxe0 leaves ACTIVE, A parks the link"
# Probes lost before the port goes down (rxe in the guest drops a packet now and then) are not
# the port's doing: the count is taken right before.
scrape_port $PORT_A "$WORK/up"
lost0=$(value "$WORK/up" rdma_prober_probes_lost_total "${L[@]}")
ip link set veth0 down
wait_for $PORT_A 0 rdma_prober_local_port_up device=rxe0 port=1 && ok "A: local_port_up 0" || bad "A: local port still up"
scrape_port $PORT_A "$WORK/down1"
lost1=$(value "$WORK/down1" rdma_prober_probes_lost_total "${L[@]}")
sent1=$(value "$WORK/down1" rdma_prober_probes_sent_total "${L[@]}")
[[ -z "$(series "$WORK/down1" rdma_prober_peer_up "${L[@]}")" ]] && ok "A: no peer_up for the parked link" ||
  bad "A: peer_up exported for a parked link: $(series "$WORK/down1" rdma_prober_peer_up "${L[@]}")"
sleep 3  # 15 probe intervals: none may be sent or lost from the parked port
scrape_port $PORT_A "$WORK/down2"
lost2=$(value "$WORK/down2" rdma_prober_probes_lost_total "${L[@]}")
sent2=$(value "$WORK/down2" rdma_prober_probes_sent_total "${L[@]}")
num_eq "$sent2" "$sent1" && ok "A: nothing sent while parked ($sent1)" || bad "A: sent $sent1 -> $sent2 while parked"
num_eq "$lost2" "$lost1" && ok "A: nothing lost while parked ($lost1)" || bad "A: lost $lost1 -> $lost2 while parked"
num_eq "$lost1" "$lost0" && ok "A: the port going down lost no probe ($lost0 before, $lost1 after)" ||
  bad "A: $((lost1 - lost0)) probes lost as the port went down ($lost0 -> $lost1)"

section "veth0 up: rxe0 ACTIVE again, A probes again"
ip link set veth0 up
wait_for $PORT_A 1 rdma_prober_local_port_up device=rxe0 port=1 && ok "A: local_port_up 1" || bad "A: local port never up"
wait_for $PORT_A 1 rdma_prober_peer_up "${L[@]}" && ok "A sees b up again" || bad "A: peer b never up again"
wait_at_least $PORT_A "$((sent2 + 1))" rdma_prober_probes_sent_total "${L[@]}" &&
  ok "A: probes again, counters continue ($sent2 -> $(value "$WORK/poll" rdma_prober_probes_sent_total "${L[@]}"))" ||
  bad "A: sent $sent2 -> $(value "$WORK/poll" rdma_prober_probes_sent_total "${L[@]}")"
finish
