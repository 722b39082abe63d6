// The `mote:actor` interfaces as componentize-js binds them: the SDK's one door to the host.
// Unit tests replace these modules with a fake (tests/fake/).
import * as host from 'mote:actor/host@0.2.0';
import * as supervision from 'mote:actor/supervision@0.2.0';
import * as timers from 'mote:actor/timers@0.2.0';
import * as messaging from 'mote:actor/messaging@0.2.0';
import * as persistence from 'mote:actor/persistence@0.2.0';
import * as clock from 'mote:actor/clock@0.2.0';
import * as forwarding from 'mote:actor/forwarding@0.2.0';
import * as lookup from 'mote:actor/lookup@0.2.0';
import * as naming from 'mote:actor/naming@0.2.0';
import * as stash from 'mote:actor/stash@0.2.0';
import * as callouts from 'mote:actor/callouts@0.2.0';
import * as priority from 'mote:actor/priority@0.2.0';
import * as lifecycle from 'mote:actor/lifecycle@0.2.0';
import * as delivery from 'mote:actor/delivery@0.2.0';

export {
  host,
  supervision,
  timers,
  messaging,
  persistence,
  clock,
  forwarding,
  lookup,
  naming,
  stash,
  callouts,
  priority,
  lifecycle,
  delivery,
};
