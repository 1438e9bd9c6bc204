import { everyPageSuite, SIZES } from './every-page.ts';

// The desktop half of this suite is desktop.browser.test.ts: two files run side by side.
everyPageSuite([SIZES.phone], { measure: true });
