package io.tickwheel.client;

import java.util.List;

/**
 * ClusterStatus is the reply of the admin op cluster: the node's raft view and the
 * latest membership.
 *
 * @param role leader, follower or candidate
 * @param leader the leader's node id, "" when unknown
 * @param term raft's term
 * @param commitIndex raft's commit index
 * @param appliedIndex raft's applied index
 * @param members the members
 * @param check the id of the state check a {@code check} command marked (0 for the other
 *     commands)
 */
public record ClusterStatus(String role, String leader, long term, long commitIndex, long appliedIndex,
    List<Member> members, long check) {
  /**
   * Member is one node of the configuration.
   *
   * @param id its node id
   * @param raftAddr its raft address
   * @param voter whether it votes
   */
  public record Member(String id, String raftAddr, boolean voter) {}
}
